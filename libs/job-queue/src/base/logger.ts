/** The logging the engine needs; Nest's Logger fits. */
export interface EngineLogger {
  log(message: string): void;
  warn(message: string): void;
  error(message: string): void;
  debug?(message: string): void;
}
