import { afterEach } from '@jest/globals';
import type { ExecutionContext } from '@nestjs/common';
import type { ModuleRef } from '@nestjs/core';
import { HttpContext, type HttpReaders } from '../../lib/transports/http/http.context.js';
import type { HttpRequestLike } from '../../lib/shared/http/http-request.js';
import type { ResolvedRouteOptions } from '../../lib/shared/interfaces/resolved-options.interface.js';
import { type IdempotencyModuleOptions, InMemoryStore } from '../../lib/index.js';
import { IdempotencyInterceptor } from '../../lib/nest/idempotency.interceptor.js';
import { HttpTransport } from '../../lib/transports/http/http.transport.js';
import { CommitSettler } from '../../lib/core/commit.settler.js';
import { transportTable } from '../../lib/core/transport.table.js';
import { IdempotencyService } from '../../lib/core/idempotency.service.js';
import { KeyClaimer } from '../../lib/core/key.claimer.js';
import { DuplicateWaiters } from '../../lib/core/waiting/duplicate.waiters.js';
import { ResponseSealer } from '../../lib/ops/encryption/response.sealer.js';
import { IdempotencyObserver } from '../../lib/core/events/idempotency.observer.js';
import { OutcomeReporter } from '../../lib/core/events/outcome.reporter.js';
import { IdentityResolverLoader } from '../../lib/core/identity-resolver.loader.js';
import { LeaseRenewer } from '../../lib/core/lease.renewer.js';
import { resolveModuleOptions } from '../../lib/shared/options/module-options.resolver.js';
import { RecordBuilder } from '../../lib/core/record.builder.js';
import { RecordCommitter } from '../../lib/core/record.committer.js';
import { RequestFingerprinter } from '../../lib/transports/http/request.fingerprinter.js';
import { RouteOptionsRegistry } from '../../lib/nest/route-options.registry.js';
import { TransactionFailures } from '../../lib/core/transaction.failures.js';
import { InboxRunner } from '../../lib/core/inbox.runner.js';
import { MessageAcknowledger } from '../../lib/transports/messages/message.acknowledger.js';
import { MessageRunner } from '../../lib/transports/messages/message.runner.js';
import { GraphqlRunner } from '../../lib/transports/graphql/graphql.runner.js';
import { PhasedRunner } from '../../lib/transports/http/phased.runner.js';
import { PhaseSettler } from '../../lib/core/phase.settler.js';
import { TransactionSettler } from '../../lib/core/transaction.settler.js';
import { TransactionRunner } from '../../lib/transports/http/transaction.runner.js';
import { ScriptedStore } from './scripted-store.js';

const renewers = new Set<LeaseRenewer>();

/**
 * The module's providers wired by hand around a {@link ScriptedStore}, as Nest would wire them:
 * for unit tests of the protocol, the interceptor and the lease renewer. `moduleRef` stands in for
 * the container identity resolver classes come from.
 */
export function createProtocol(options: IdempotencyModuleOptions = {}, moduleRef: Partial<ModuleRef> = {}) {
  const store = new ScriptedStore();
  const resolved = resolveModuleOptions({ store, ...options }, () => new InMemoryStore());
  const identities = new IdentityResolverLoader(moduleRef as ModuleRef, resolved);
  // Not initialised: nothing observes outcomes until a test awaits observer.onModuleInit().
  const observer = new IdempotencyObserver(resolved, moduleRef as ModuleRef);
  const reporter = new OutcomeReporter(observer);
  const records = new RecordBuilder(resolved, new ResponseSealer(resolved));
  const committer = new RecordCommitter(resolved, observer, reporter);
  const waiters = new DuplicateWaiters(resolved);
  const claimer = new KeyClaimer(resolved, observer, records, waiters);
  const service = new IdempotencyService(resolved, observer, records, reporter, committer, claimer, waiters);
  const fingerprints = new RequestFingerprinter();
  const readers: HttpReaders = { options: resolved, identities, fingerprints };
  /** The protocol as the interceptor calls it, on an HTTP request. */
  const begin = (request: object, context: ExecutionContext, route: ResolvedRouteOptions) =>
    service.begin(new HttpContext(request as HttpRequestLike, context, {}, readers), route);
  const routes = new RouteOptionsRegistry(resolved);
  const leases = new LeaseRenewer(resolved, observer);
  renewers.add(leases);
  const failures = new TransactionFailures(service, reporter);
  const settler = new TransactionSettler(resolved, service, failures, reporter);
  const transactions = new TransactionRunner(failures, resolved, settler);
  const plain = new CommitSettler(service, leases);
  const inbox = new InboxRunner(service, leases, settler, plain, resolved);
  const acks = new MessageAcknowledger();
  const messages = new MessageRunner(inbox, acks, resolved);
  const graphql = new GraphqlRunner(inbox, identities, resolved);
  const http = new HttpTransport(
    service,
    leases,
    transactions,
    new PhasedRunner(resolved, new PhaseSettler(resolved, service, records, leases, failures, reporter)),
    plain,
    identities,
    fingerprints,
  );
  const interceptor = new IdempotencyInterceptor(transportTable([http, messages, graphql]), routes);
  return { store, options: resolved, identities, observer, service, begin, routes, leases, interceptor, waiters, acks };
}

/** Stops every lease timer {@link createProtocol} started; call it inside a describe. */
export function destroyProtocolsAfterEach(): void {
  afterEach(() => {
    for (const leases of renewers) (leases as unknown as { stop(): void }).stop();
    renewers.clear();
  });
}
