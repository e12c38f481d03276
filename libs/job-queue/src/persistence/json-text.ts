/**
 * The escapes in JSON text that PostgreSQL jsonb refuses: NUL (\u0000), and a UTF-16 surrogate
 * standing alone (JSON.stringify escapes a surrogate only when it is not half of a pair; a string
 * cut in the middle of an emoji has one). An escape is a backslash run of odd length before the
 * "u"; "\\u0000" is a literal backslash and is fine.
 */
const REFUSED_ESCAPE = /(?<!\\)(?:\\\\)*\\u(0000|d[89a-f][0-9a-f]{2})/i;

/**
 * Why jsonb would refuse this JSON text (from JSON.stringify), or null when it would store it.
 * JSON.stringify writes a \u escape only for control characters and lone surrogates, so nearly
 * every text is cleared by the first test.
 */
export function jsonbRefusal(json: string): string | null {
  if (!json.includes('\\u')) return null;
  const escape = REFUSED_ESCAPE.exec(json)?.[1];
  if (escape === undefined) return null;
  return escape === '0000'
    ? 'a NUL character (\\u0000), which PostgreSQL jsonb cannot store'
    : `a lone UTF-16 surrogate (\\u${escape.toLowerCase()}: half of a character, as when a string is cut inside an emoji), ` +
        'which PostgreSQL jsonb cannot store';
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * True when text holds half of a UTF-16 pair. Sent as text, it reaches PostgreSQL as U+FFFD (the
 * UTF-8 encoder replaces it), so a key holding one would not match itself when read back.
 */
export function hasLoneSurrogate(text: string): boolean {
  return LONE_SURROGATE.test(text);
}
