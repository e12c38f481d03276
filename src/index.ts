// The package's public entry: everything `import { … } from 'auto-job-queue'` offers.
export * from '../libs/job-queue/src/index.js';
