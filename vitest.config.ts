import swc from 'unplugin-swc';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  // SWC keeps decorator metadata, which Nest's dependency injection needs.
  plugins: [swc.vite({ module: { type: 'es6' } })],
  // The examples import the package by its name, as an application does.
  resolve: {
    alias: [
      { find: /^auto-job-queue\/testing$/, replacement: fileURLToPath(new URL('./src/testing.ts', import.meta.url)) },
      { find: /^auto-job-queue$/, replacement: fileURLToPath(new URL('./src/index.ts', import.meta.url)) },
    ],
  },
  test: {
    include: ['libs/**/*.spec.ts', 'test/**/*.e2e-spec.ts', 'examples/**/*.vitest.spec.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    teardownTimeout: 30_000,
  },
});
