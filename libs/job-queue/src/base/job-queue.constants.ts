/** Injection tokens and metadata keys; values are namespaced so they never collide with an app's. */
export const JOB_QUEUE_OPTIONS = Symbol.for('auto-job-queue:options');
export const JOB_STORE = Symbol.for('auto-job-queue:store');
/** JobInstruments when metrics are on, else null. */
export const JOB_INSTRUMENTS = Symbol.for('auto-job-queue:instruments');
/** JobTracing when the app has @opentelemetry/api and tracing is on, else null. */
export const JOB_TRACING = Symbol.for('auto-job-queue:tracing');
export const JOB_HANDLER_METADATA = 'auto-job-queue:job-handler';
