// The test set of `npm run test:mutation`, as one jest test file. Stryker runs the tests covering a
// mutant, but jest loads every test file of the run to find them, and each file pays for importing
// Nest's module graph afresh: one file makes that once per mutant instead of once per suite.
// Order matters for the bail environment (test/support/bail.environment.cjs): the fast unit suites
// first, so most mutants are killed before the Redis suite starts its servers.
import '../unit/key.util.spec.js';
import '../unit/fingerprint.util.spec.js';
import '../unit/module-options.resolver.spec.js';
import '../unit/route-options.resolver.spec.js';
import '../unit/store-value.codec.spec.js';
import '../unit/response.recorder.spec.js';
import '../unit/response.writer.spec.js';
import '../unit/value.renderer.spec.js';
import '../unit/idempotency.answers.spec.js';
import '../unit/idempotency.filter.spec.js';
import '../unit/idempotency.service.spec.js';
import '../unit/lease.renewer.spec.js';
import '../unit/pool.lanes.spec.js';
import '../unit/identity-body.spec.js';
import '../unit/idempotent-handlers.finder.spec.js';
import '../unit/idempotency.observer.spec.js';
import '../unit/telemetry.spec.js';
import '../unit/optional-peer.util.spec.js';
import '../unit/idempotency.health-indicator.spec.js';
import '../unit/idempotency.admin.spec.js';
import '../unit/store-contract.spec.js';
import '../unit/route-options.accessor.spec.js';
import '../unit/idempotency.interceptor.spec.js';
import '../unit/idempotency.explorer.spec.js';
import '../unit/idempotency.module.spec.js';
import '../unit/openapi.fragments.spec.js';
import '../unit/openapi.explorer.spec.js';
import '../e2e/openapi.e2e.spec.js';
import '../e2e/client-conventions.e2e.spec.js';
import '../e2e/fingerprint.e2e.spec.js';
import '../e2e/events.e2e.spec.js';
import '../e2e/open-telemetry.e2e.spec.js';
import '../e2e/admin.e2e.spec.js';
import '../e2e/health.e2e.spec.js';
import '../e2e/encryption.e2e.spec.js';
import '../e2e/tenants.e2e.spec.js';
import '../e2e/request-scope.e2e.spec.js';
import '../e2e/registrations.e2e.spec.js';
import '../e2e/contexts.e2e.spec.js';
import '../e2e/compression.e2e.spec.js';
import '../unit/response.sealer.spec.js';
import '../unit/redis-cache.options.spec.js';
import '../unit/in-memory.cache.spec.js';
import '../unit/in-memory-contract.spec.js';
import '../unit/cls.transactions.spec.js';
import '../redis/redis-cache.redis.spec.js';
import '../unit/sql.sweeper.spec.js';
import '../sqlite/sqlite-store.sqlite.spec.js';
import '../postgres/postgres-store.postgres.spec.js';
import '../postgres/transactional.postgres.spec.js';
import '../sqlite/production.sqlite.spec.js';
import '../postgres/production.postgres.spec.js';
