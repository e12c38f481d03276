import { type CanActivate, type ExecutionContext, Injectable } from '@nestjs/common';

/**
 * The demo's stand-in for an auth guard: a token in DASHBOARD_TOKEN, sent as a Bearer header or
 * as `?token=` once (then kept in a cookie). A real app puts its own auth guard here.
 */
@Injectable()
export class DemoDashboardGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const token = process.env.DASHBOARD_TOKEN ?? 'demo';
    const request = context.switchToHttp().getRequest<{ headers: Record<string, string | undefined>; query?: Record<string, unknown> }>();
    const response = context.switchToHttp().getResponse<{ setHeader?(name: string, value: string): void }>();
    if (request.headers.authorization === `Bearer ${token}` || (request.headers.cookie ?? '').split(/;\s*/).includes(`dashboard=${token}`)) return true;
    if (request.query?.token === token) {
      response.setHeader?.('set-cookie', `dashboard=${token}; HttpOnly; SameSite=Strict; Path=/`);
      return true;
    }
    return false;
  }
}
