/** The module's tables in one schema, as statement texts name them, and its notification channel. */
export interface JobTables {
  readonly schema: string;
  readonly jobs: string;
  readonly types: string;
  readonly starts: string;
  readonly walk: string;
  readonly effects: string;
  readonly workers: string;
  readonly paused: string;
  readonly throughput: string;
  readonly schedules: string;
  readonly dependencies: string;
  readonly groupTurns: string;
  /** channelOf(schema). */
  readonly channel: string;
}

export function jobTables(schema: string): JobTables {
  return {
    schema,
    jobs: `"${schema}".jobs`,
    types: `"${schema}".job_types`,
    starts: `"${schema}".job_starts`,
    walk: `"${schema}".retention_walk`,
    effects: `"${schema}".job_effects`,
    workers: `"${schema}".job_workers`,
    paused: `"${schema}".paused_types`,
    throughput: `"${schema}".job_throughput`,
    schedules: `"${schema}".job_schedules`,
    dependencies: `"${schema}".job_dependencies`,
    groupTurns: `"${schema}".job_group_turns`,
    channel: channelOf(schema),
  };
}

/** The one channel every notification of the schema goes to (JobNotificationListener listens on it). */
export function channelOf(schema: string): string {
  return `auto_job_queue:${schema}`;
}
