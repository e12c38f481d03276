import { JobEntity } from './job.entity.js';

/** Entity classes to list in an app-owned DataSource's `entities`. */
export const JOB_QUEUE_ENTITIES = [JobEntity];
