import { Logger } from '@nestjs/common';
import type { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { NEST_HTTP_CODE_METADATA, NEST_METHOD_METADATA } from '../../shared/idempotency.constants.js';
import { LOGS } from '../../shared/messages/operator.messages.js';
import { findIdempotentHandlers, servedBy } from '../../nest/idempotent-handlers.finder.js';
import { importOptional } from '../../shared/utils/optional-peer.util.js';
import type { ResolvedIdempotencyOptions } from '../../shared/interfaces/resolved-options.interface.js';
import type { RouteOptionsRegistry } from '../../nest/route-options.registry.js';
import { type RouteDoc, routeDoc } from './openapi.fragments.js';

type Decorator = (target: object, key: string, descriptor: PropertyDescriptor) => unknown;
type Responses = Record<string, { description?: string; headers?: Record<string, unknown> } & Record<string, unknown>>;

/** The parts of `@nestjs/swagger` used here, typed here: its types must not leak into this package's. */
export interface SwaggerApi {
  DECORATORS: { API_OPERATION: string; API_RESPONSE: string; API_PARAMETERS: string };
  ApiHeader(options: object): Decorator;
  ApiResponse(options: object): Decorator;
  ApiOperation(options: object): Decorator;
}

/** `RequestMethod.POST` of @nestjs/common, whose default success status is 201 (Swagger's rule too). */
const POST = 1;

/** What Swagger's metadata of a handler held before this module added to it. */
interface Original {
  readonly keys: SwaggerApi['DECORATORS'];
  readonly parameters: unknown;
  readonly responses: unknown;
  readonly operation: unknown;
}

// Per handler, across applications: a handler documented again (another application in the same
// process, with other options) starts from what its own decorators wrote, not from the last
// application's additions.
const originals = new WeakMap<object, Original>();

/**
 * `@nestjs/swagger` when it is installed; `undefined` when it is not. A copy that fails to load
 * for another reason is logged and left alone: documentation is not worth failing the start.
 */
export function loadSwagger(
  logger: Logger,
  load: () => Promise<SwaggerApi> = () => import('@nestjs/swagger'),
): Promise<SwaggerApi | undefined> {
  return importOptional('@nestjs/swagger', load, (reason) => logger.warn(LOGS.swaggerFailed(reason)));
}

/**
 * Documents every `@Idempotent()` route for `SwaggerModule.createDocument()`: the key header, the
 * policy (expiry) in the description, the module's 400/409/422/503 answers, and the replay header on
 * the success responses. It writes Swagger's metadata through Swagger's own decorators while the
 * application is created, so a document made before `app.init()` or `listen()` has it too.
 */
export class OpenApiExplorer {
  private readonly logger = new Logger('Idempotency');

  constructor(
    private readonly options: ResolvedIdempotencyOptions,
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly routes: RouteOptionsRegistry,
    /** How `@nestjs/swagger` is loaded; a test hands in a failing one. */
    private readonly load?: () => Promise<SwaggerApi>,
  ) {}

  /** Loads Swagger if it is installed and `openApi` is on, and documents the routes; returns how many. */
  async explore(): Promise<number> {
    // Only the controllers this registration serves: another's are documented with its own options.
    const handlers = findIdempotentHandlers(this.discovery, this.scanner, this.routes, servedBy(this.options));
    if (!this.options.openApi) {
      // Another application of this process may have documented the same handlers.
      for (const { handler } of handlers) undocument(handler);
      return 0;
    }
    if (handlers.length === 0) return 0;
    const swagger = await loadSwagger(this.logger, this.load);
    if (!swagger) return 0;
    for (const { type, name, handler, where } of handlers) {
      document(swagger, type, name, handler, routeDoc(this.options, this.routes.resolve(type, handler, where)));
    }
    return handlers.length;
  }
}

function join(first: string | undefined, second: string): string {
  return first ? `${first}\n\n${second}` : second;
}

/** Puts back what the handler's own decorators wrote, if this module added to it. */
function undocument(handler: object): void {
  const original = originals.get(handler);
  if (!original) return;
  restore(original.keys.API_PARAMETERS, handler, original.parameters);
  restore(original.keys.API_RESPONSE, handler, original.responses);
  restore(original.keys.API_OPERATION, handler, original.operation);
}

function restore(key: string, handler: object, value: unknown): void {
  if (value === undefined) Reflect.deleteMetadata(key, handler);
  else Reflect.defineMetadata(key, value, handler);
}

/** The success statuses a handler declares, or the one Swagger would give it: `@HttpCode()`, else 201 for POST, 200. */
function successStatuses(declared: Responses, handler: object): string[] {
  const listed = Object.keys(declared).filter((s) => /^2(\d\d|XX)$/.test(s));
  if (listed.length > 0) return listed;
  const code = Reflect.getMetadata(NEST_HTTP_CODE_METADATA, handler) as number | undefined;
  return [String(code ?? (Reflect.getMetadata(NEST_METHOD_METADATA, handler) === POST ? 201 : 200))];
}

function document(swagger: SwaggerApi, type: { prototype: object }, name: string, handler: object, doc: RouteDoc): void {
  const { DECORATORS } = swagger;
  let original = originals.get(handler);
  if (!original) {
    original = {
      keys: DECORATORS,
      parameters: Reflect.getMetadata(DECORATORS.API_PARAMETERS, handler),
      responses: Reflect.getMetadata(DECORATORS.API_RESPONSE, handler),
      operation: Reflect.getMetadata(DECORATORS.API_OPERATION, handler),
    };
    originals.set(handler, original);
  }
  // A key header the application documented by hand gives way to the one the options describe.
  const parameters = ((original.parameters ?? []) as { in?: string; name?: string }[]).filter(
    (p) => !(p.in === 'header' && p.name?.toLowerCase() === doc.header.name.toLowerCase()),
  );
  restore(DECORATORS.API_PARAMETERS, handler, parameters.length > 0 ? parameters : undefined);
  const descriptor = { value: handler, writable: true, enumerable: false, configurable: true };
  swagger.ApiHeader(doc.header)(type.prototype, name, descriptor);

  const operation = (original.operation ?? {}) as { description?: string };
  swagger.ApiOperation({ ...operation, description: join(operation.description, doc.policy) })(type.prototype, name, descriptor);

  // Responses the controller class declares count as declared too: Swagger merges them in.
  const own = (original.responses ?? {}) as Responses;
  const declared: Responses = {
    ...((Reflect.getMetadata(DECORATORS.API_RESPONSE, type.prototype.constructor) ?? {}) as Responses),
    ...own,
  };
  const entries = new Map<string, object>();
  for (const status of successStatuses(declared, handler)) {
    const entry = declared[status] ?? { description: '' };
    entries.set(status, { ...entry, headers: { ...doc.successHeaders, ...entry.headers } });
  }
  for (const error of doc.errors) {
    const entry = declared[String(error.status)];
    const headers = { ...error.headers, ...doc.errorHeaders, ...entry?.headers };
    // A status the application documents keeps its body; this module's meaning is added to it.
    entries.set(
      String(error.status),
      entry
        ? { ...entry, description: join(entry.description, error.description), headers }
        : { description: error.description, headers, content: error.content },
    );
  }
  // Swagger's decorator merges an entry into one already there: write each of these afresh.
  const untouched = Object.fromEntries(Object.entries(own).filter(([status]) => !entries.has(status)));
  restore(DECORATORS.API_RESPONSE, handler, Object.keys(untouched).length > 0 ? untouched : undefined);
  for (const [status, entry] of entries)
    swagger.ApiResponse({ ...entry, status: statusKey(status) })(type.prototype, name, descriptor);
}

function statusKey(status: string): number | string {
  return /^\d+$/.test(status) ? Number(status) : status;
}
