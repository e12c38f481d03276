/** Injection tokens and metadata keys; values are namespaced so they never collide with an app's. */
export const JOB_QUEUE_OPTIONS = Symbol.for('auto-job-queue:options');
export const JOB_STORE = Symbol.for('auto-job-queue:store');
/** JobInstruments when metrics are on, else null. */
export const JOB_INSTRUMENTS = Symbol.for('auto-job-queue:instruments');
export const JOB_HANDLER_METADATA = 'auto-job-queue:job-handler';
