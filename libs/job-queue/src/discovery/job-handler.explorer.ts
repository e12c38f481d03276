import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import type { JobHandlerMetadata } from '../decorators/job-handler-options.js';
import { JobQueueConnection } from '../connection/job-queue.connection.js';
import { JobQueueConfigError } from '../errors/job-queue-config.error.js';
import { JOB_HANDLER_METADATA, JOB_QUEUE_OPTIONS } from '../base/job-queue.constants.js';
import type { ResolvedJobQueueOptions } from '../options/job-queue-options.js';
import { JobHandlerRegistry } from './job-handler.registry.js';
import { resolveHandler } from './resolve-handler-options.js';

/** Finds every `@JobHandler` method on the app's providers at boot and registers it. */
@Injectable()
export class JobHandlerExplorer implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    private readonly registry: JobHandlerRegistry,
    @Inject(JOB_QUEUE_OPTIONS) private readonly options: ResolvedJobQueueOptions,
    private readonly connection: JobQueueConnection,
  ) {}

  /** A boot error here (two handlers for a type, a scoped provider) also closes the module's DataSource. */
  onModuleInit(): Promise<void> {
    return this.connection.closedIfFails(() => this.discover());
  }

  private discover(): void {
    for (const wrapper of this.discovery.getProviders()) {
      const metatype = wrapper.metatype as { prototype?: object; name?: string } | undefined;
      const prototype = wrapper.instance ? Object.getPrototypeOf(wrapper.instance) : metatype?.prototype;
      if (!prototype || typeof prototype !== 'object') continue;
      for (const methodName of this.scanner.getAllMethodNames(prototype)) {
        const method = (prototype as Record<string, unknown>)[methodName];
        if (typeof method !== 'function') continue;
        const metadata = this.reflector.get<JobHandlerMetadata | undefined>(JOB_HANDLER_METADATA, method);
        if (!metadata) continue;
        const location = `${wrapper.name?.toString() ?? metatype?.name ?? 'provider'}.${methodName}`;
        if (!wrapper.isDependencyTreeStatic() || !wrapper.instance) {
          throw new JobQueueConfigError(
            `@JobHandler('${metadata.type}') on ${location}: handlers must live on singleton providers; ` +
              'a request- or transient-scoped provider (or one depending on one) has no instance for the worker to call.',
          );
        }
        const instance = wrapper.instance as Record<string, (...args: unknown[]) => unknown>;
        this.registry.register(
          resolveHandler(metadata, location, (payload, job) => instance[methodName](payload, job), this.options),
        );
      }
    }
  }
}
