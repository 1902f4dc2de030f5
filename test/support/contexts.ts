import type { ArgumentsHost, ExecutionContext } from '@nestjs/common';

/** What a fake HTTP context hands out; anything left out is absent. */
export interface FakeHttp {
  type?: string;
  request?: object;
  response?: object;
  controller?: object;
  handler?: object;
}

/** An ExecutionContext (and ArgumentsHost) with just what this package reads from one. */
export function httpContext(http: FakeHttp = {}): ExecutionContext & ArgumentsHost {
  return {
    getType: () => http.type ?? 'http',
    getClass: () => http.controller,
    getHandler: () => http.handler,
    switchToHttp: () => ({ getRequest: () => http.request, getResponse: () => http.response }),
  } as unknown as ExecutionContext & ArgumentsHost;
}
