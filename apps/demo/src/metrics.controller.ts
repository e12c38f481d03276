import { Controller, Get, Header } from '@nestjs/common';
import { register } from 'prom-client';

/** Prometheus scrapes this; the queue's series are on prom-client's global registry (`metrics: true`). */
@Controller()
export class MetricsController {
  @Get('metrics')
  @Header('content-type', register.contentType)
  metrics(): Promise<string> {
    return register.metrics();
  }
}
