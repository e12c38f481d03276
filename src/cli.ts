#!/usr/bin/env node
// The `auto-job-queue` command: `npx auto-job-queue <command>`. See docs/operations/cli.md.
import 'reflect-metadata';
import { realpathSync } from 'node:fs';
import { runCli } from '../libs/job-queue/src/cli/run-cli.js';

// The script itself (npx runs it through a symlink): its package.json holds the version.
runCli(process.argv.slice(2), process.env, { stdout: (t) => process.stdout.write(t), stderr: (t) => process.stderr.write(t) }, realpathSync(process.argv[1])).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`auto-job-queue: ${(error as Error)?.stack ?? error}\n`);
    process.exitCode = 1;
  },
);
