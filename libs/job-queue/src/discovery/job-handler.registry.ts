import { Injectable } from '@nestjs/common';
import { DuplicateJobHandlerError } from '../errors/duplicate-job-handler.error.js';
import type { HandlerLookup, RegisteredHandler } from '../base/registered-handler.js';

/** Lookup of handlers by job type, filled once at boot by the explorer. */
@Injectable()
export class JobHandlerRegistry implements HandlerLookup {
  private readonly handlers = new Map<string, RegisteredHandler>();

  register(handler: RegisteredHandler): void {
    const existing = this.handlers.get(handler.type);
    if (existing) throw new DuplicateJobHandlerError(handler.type, existing.location, handler.location);
    this.handlers.set(handler.type, handler);
  }

  get(type: string): RegisteredHandler | undefined {
    return this.handlers.get(type);
  }

  types(): string[] {
    return [...this.handlers.keys()];
  }

  all(): RegisteredHandler[] {
    return [...this.handlers.values()];
  }
}
