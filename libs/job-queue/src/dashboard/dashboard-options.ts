import type { CanActivate, ModuleMetadata, Type } from '@nestjs/common';

/** What a dashboard user may do, each decided by `authorize`. */
export type DashboardAction = 'retry' | 'cancel' | 'pause' | 'resume' | 'purge';

export interface JobQueueDashboardOptions {
  /** Where it is served, under the app's global prefix. @default 'queue' */
  path?: string;
  /** Nest guards (classes, resolved by DI) on every page and API route. Without them the dashboard is read-only. */
  guards?: Array<Type<CanActivate>>;
  /** Modules the guards need (an auth module, say). */
  imports?: ModuleMetadata['imports'];
  /** No actions at all, whatever the guards. @default false (true without guards) */
  readOnly?: boolean;
  /** Decides each action per request (roles); a refused one answers 403 and its button is not shown. */
  authorize?: (action: DashboardAction, request: unknown) => boolean | Promise<boolean>;
}

export const DASHBOARD_ACTIONS: readonly DashboardAction[] = ['retry', 'cancel', 'pause', 'resume', 'purge'];
