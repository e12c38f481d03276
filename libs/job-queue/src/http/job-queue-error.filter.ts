import { type ArgumentsHost, Catch, type ExceptionFilter, HttpStatus } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import {
  InvalidJobError,
  JobNotFoundError,
  type JobQueueError,
  JobStateError,
  QueueSaturatedError,
} from '../errors/index.js';

/** Seconds a client should wait before retrying an enqueue the queue refused. */
const RETRY_AFTER_SECONDS = 5;

/**
 * Turns the queue's errors into HTTP answers on any Nest HTTP platform: backpressure becomes 503
 * with Retry-After (so clients and load balancers back off), bad input 400, an unknown job 404,
 * and an action the job's status does not allow 409. Register it globally
 * (`{ provide: APP_FILTER, useClass: JobQueueErrorFilter }`) or with `@UseFilters`.
 */
@Catch(QueueSaturatedError, InvalidJobError, JobNotFoundError, JobStateError)
export class JobQueueErrorFilter implements ExceptionFilter {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  catch(error: JobQueueError, host: ArgumentsHost): void {
    const { httpAdapter } = this.adapterHost;
    const response = host.switchToHttp().getResponse();
    if (error instanceof QueueSaturatedError) {
      httpAdapter.setHeader(response, 'Retry-After', String(RETRY_AFTER_SECONDS));
      httpAdapter.reply(
        response,
        { ...body(HttpStatus.SERVICE_UNAVAILABLE, 'Service Unavailable', error), depth: error.depth, limit: error.limit },
        HttpStatus.SERVICE_UNAVAILABLE,
      );
    } else if (error instanceof InvalidJobError) {
      httpAdapter.reply(response, { ...body(HttpStatus.BAD_REQUEST, 'Bad Request', error), field: error.field }, HttpStatus.BAD_REQUEST);
    } else if (error instanceof JobNotFoundError) {
      httpAdapter.reply(response, body(HttpStatus.NOT_FOUND, 'Not Found', error), HttpStatus.NOT_FOUND);
    } else {
      httpAdapter.reply(response, body(HttpStatus.CONFLICT, 'Conflict', error), HttpStatus.CONFLICT);
    }
  }
}

function body(statusCode: number, reason: string, error: JobQueueError) {
  return { statusCode, error: reason, code: error.code, message: error.message };
}
