import { SetMetadata } from '@nestjs/common';
import { JOB_HANDLER_METADATA } from '../base/job-queue.constants.js';
import type { JobHandlerMetadata, JobHandlerOptions } from './job-handler-options.js';

/**
 * Marks a provider method as the handler of one job type. The method receives the payload
 * (parsed by `options.schema` when given) and a `JobContext`.
 */
export function JobHandler(type: string, options: JobHandlerOptions = {}): MethodDecorator {
  return SetMetadata<string, JobHandlerMetadata>(JOB_HANDLER_METADATA, { type, options });
}
