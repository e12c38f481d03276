/** A paused type's change, as this process learns of it. */
export interface PauseChange {
  paused: string[];
  resumed: string[];
}

/**
 * The types no worker may start (JobQueueAdmin.pause), as this process last read them from the
 * database. The claim planner claims none of them and the buffer starts none of them.
 */
export class PausedTypes {
  private current: ReadonlySet<string> = new Set();

  /** The paused types; empty while nothing is paused. */
  get types(): ReadonlySet<string> {
    return this.current;
  }

  /** Cheap while nothing is paused: the claim loop asks for every type it plans. */
  has(type: string): boolean {
    return this.current.size > 0 && this.current.has(type);
  }

  /** Replaces the set with what the database holds now; says what changed. */
  replace(types: readonly string[]): PauseChange {
    const next = new Set(types);
    const paused = [...next].filter((type) => !this.current.has(type));
    const resumed = [...this.current].filter((type) => !next.has(type));
    if (paused.length > 0 || resumed.length > 0) this.current = next;
    return { paused, resumed };
  }
}
