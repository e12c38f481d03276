/** setTimeout's longest delay: a longer one would fire at once. */
export const MAX_TIMER_MS = 2 ** 31 - 1;
