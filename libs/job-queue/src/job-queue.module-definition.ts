import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { JobQueueOptions } from './options/job-queue-options.js';

/** forRoot / forRootAsync come from Nest's builder; the module is always global. */
export const {
  ConfigurableModuleClass: JobQueueConfigurableModule,
  MODULE_OPTIONS_TOKEN: JOB_QUEUE_MODULE_OPTIONS,
  OPTIONS_TYPE: JOB_QUEUE_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: JOB_QUEUE_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<JobQueueOptions>({ moduleName: 'JobQueue' })
  .setClassMethodName('forRoot')
  .setExtras({ isGlobal: true }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
  .build();
