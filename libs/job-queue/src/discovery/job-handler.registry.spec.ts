import { describe, expect, it } from 'vitest';
import { DuplicateJobHandlerError } from '../errors/duplicate-job-handler.error.js';
import { JobQueueError } from '../errors/job-queue.error.js';
import { JobHandlerRegistry } from './job-handler.registry.js';
import type { RegisteredHandler } from '../base/registered-handler.js';
import { handlerStub } from '../base/registered-handler.stub.js';

function handler(type: string, location: string): RegisteredHandler {
  return handlerStub({ type, location });
}

describe('JobHandlerRegistry', () => {
  it('looks handlers up by type', () => {
    const registry = new JobHandlerRegistry();
    const welcome = handler('email.welcome', 'Mailer.welcome');
    const report = handler('report.build', 'Reports.build');
    registry.register(welcome);
    registry.register(report);
    expect(registry.get('email.welcome')).toBe(welcome);
    expect(registry.get('report.build')).toBe(report);
    expect(registry.get('unknown.type')).toBeUndefined();
    expect(registry.types()).toEqual(['email.welcome', 'report.build']);
    expect(registry.all()).toEqual([welcome, report]);
  });

  it('starts empty', () => {
    const registry = new JobHandlerRegistry();
    expect(registry.types()).toEqual([]);
    expect(registry.all()).toEqual([]);
  });

  it('rejects a second handler for one type, naming the type and both locations', () => {
    const registry = new JobHandlerRegistry();
    const first = handler('email.welcome', 'Mailer.welcome');
    registry.register(first);
    let thrown: unknown;
    try {
      registry.register(handler('email.welcome', 'Onboarding.sendWelcome'));
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(DuplicateJobHandlerError);
    expect(thrown).toBeInstanceOf(JobQueueError);
    const error = thrown as DuplicateJobHandlerError;
    expect(error.code).toBe('JOB_HANDLER_DUPLICATE');
    expect(error.name).toBe('DuplicateJobHandlerError');
    expect(error).toMatchObject({ type: 'email.welcome', first: 'Mailer.welcome', second: 'Onboarding.sendWelcome' });
    expect(error.message).toContain('email.welcome');
    expect(error.message).toContain('Mailer.welcome');
    expect(error.message).toContain('Onboarding.sendWelcome');
    // The first registration stays in place.
    expect(registry.get('email.welcome')).toBe(first);
    expect(registry.all()).toHaveLength(1);
  });

  it('rejects the same handler registered twice', () => {
    const registry = new JobHandlerRegistry();
    const welcome = handler('email.welcome', 'Mailer.welcome');
    registry.register(welcome);
    expect(() => registry.register(welcome)).toThrow(DuplicateJobHandlerError);
  });

  it('treats types as exact strings', () => {
    const registry = new JobHandlerRegistry();
    registry.register(handler('email.welcome', 'A.a'));
    expect(() => registry.register(handler('Email.Welcome', 'B.b'))).not.toThrow();
    expect(registry.types()).toHaveLength(2);
  });
});
