import type { ExecutionContext } from '@nestjs/common';
import { IdempotencyException } from '../../shared/exceptions/idempotency.exception.js';
import { MESSAGES } from '../../shared/messages/client.messages.js';
import type { IdempotencyContext } from '../../shared/interfaces/idempotency-context.interface.js';
import type { ResolvedRouteOptions } from '../../shared/interfaces/resolved-options.interface.js';
import { type AnswerOptions, writeAnswer } from './answer.writer.js';
import { type HttpRequestLike, sentHeader } from '../../shared/http/http-request.js';
import { hasUnreadBody } from './request.reader.js';

/** What reads an HTTP call's scope and fingerprint: the module's identity loader and fingerprinter. */
export interface HttpReaders {
  readonly options: AnswerOptions;
  readonly identities: {
    scopeOf(request: HttpRequestLike, context: ExecutionContext, route: ResolvedRouteOptions): string | Promise<string>;
  };
  readonly fingerprints: {
    of(request: HttpRequestLike, context: ExecutionContext, route: ResolvedRouteOptions): string | Promise<string>;
    matches(stored: string, fingerprint: string, request: HttpRequestLike, route: ResolvedRouteOptions): boolean;
  };
}

/** An HTTP request (Express or Fastify) as the protocol reads it: the first {@link IdempotencyContext}. */
export class HttpContext implements IdempotencyContext {
  readonly method: string;

  constructor(
    readonly request: HttpRequestLike,
    readonly context: ExecutionContext,
    readonly response: object,
    private readonly readers: HttpReaders,
  ) {
    this.method = request.method;
  }

  readonly headerKey = true;

  sentKey(name: string): string | undefined {
    return sentHeader(this.request, name);
  }

  check(): void {
    if (hasUnreadBody(this.request)) throw IdempotencyException.of('body-unread', MESSAGES.unreadBody);
  }

  scope(route: ResolvedRouteOptions): string | Promise<string> {
    return this.readers.identities.scopeOf(this.request, this.context, route);
  }

  fingerprint(route: ResolvedRouteOptions): string | Promise<string> {
    return this.readers.fingerprints.of(this.request, this.context, route);
  }

  matches(stored: string, fingerprint: string, route: ResolvedRouteOptions): boolean {
    return this.readers.fingerprints.matches(stored, fingerprint, this.request, route);
  }

  answer(outcome: unknown): void {
    writeAnswer(this.response, outcome, this.readers.options);
  }
}
