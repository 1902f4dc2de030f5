import type {
  DocumentNode,
  ExecutionResult,
  FieldNode,
  GraphQLInputType,
  GraphQLOutputType,
  GraphQLResolveInfo,
  GraphQLSchema,
  SelectionSetNode,
} from 'graphql';
import { importRequired } from '../../shared/utils/optional-peer.util.js';

/** The `graphql` package, loaded once the first idempotent mutation runs (it is the application's). */
export type GraphqlJs = typeof import('graphql');

let graphqlJs: Promise<GraphqlJs> | undefined;

export function loadGraphqlJs(): Promise<GraphqlJs> {
  // A CommonJS package: its exports arrive as named exports or, on some loaders, as `default` only.
  graphqlJs ??= importRequired('@Idempotent() on a GraphQL mutation', 'graphql', 16, () => import('graphql')).then((m) =>
    (m as { execute?: unknown }).execute ? m : (m as { default: GraphqlJs }).default,
  );
  return graphqlJs;
}

/** The response key under which each object of a stored output names its type (an abstract type's replay needs it). */
export const TYPE_KEY = '_idempotencyType';

/** A field's output as a client received it: its `data`, and the errors of fields inside it (paths relative to it). */
export interface FieldOutput {
  data: unknown;
  errors?: { path: (string | number)[]; message: string; extensions?: Record<string, unknown> }[];
}

/** The stored form of an output with errors; one without is stored as its data, as the release before stored values. */
const WITH_ERRORS = '_idempotencyOutput';

/** The output as a record keeps it: its data alone, unless fields inside it failed. */
export function storedOutput(output: FieldOutput): unknown {
  return output.errors ? { [WITH_ERRORS]: output.data, errors: output.errors } : output.data;
}

/** The output a record kept (a record of the release before holds the resolver's value: read as data). */
export function readOutput(stored: unknown): FieldOutput {
  if (stored !== null && stored !== undefined && Object.hasOwn(stored, WITH_ERRORS)) {
    const { [WITH_ERRORS]: data, errors } = stored as { [WITH_ERRORS]: unknown; errors: FieldOutput['errors'] };
    return { data, errors };
  }
  return { data: stored };
}

/**
 * One schema per return type (a field's type object, its schema's own) whose query has one field,
 * `v`, of that type, over all the schema's types (an interface's implementations are reached from
 * no field).
 */
const probes = new WeakMap<GraphQLOutputType, GraphQLSchema>();

export function probeSchema(js: GraphqlJs, schema: GraphQLSchema, type: GraphQLOutputType): GraphQLSchema {
  let probe = probes.get(type);
  if (!probe) {
    const query = new js.GraphQLObjectType({
      name: 'IdempotencyFieldOutput',
      fields: { v: { type, resolve: (root: unknown) => root } },
    });
    probe = new js.GraphQLSchema({ query, types: Object.values(schema.getTypeMap()), directives: schema.getDirectives() });
    probes.set(type, probe);
  }
  return probe;
}

/**
 * The document that completes the field's value as the request asked: its selection (fragments
 * included) under `v`, each object naming its type, the request's variables written in as literals
 * (their values are already coerced: coercing them again would fail for enums and custom scalars).
 */
function probeDocument(js: GraphqlJs, info: GraphQLResolveInfo): DocumentNode {
  const { Kind } = js;
  const selections = info.fieldNodes.flatMap((node) => node.selectionSet?.selections ?? []);
  const field: FieldNode = {
    kind: Kind.FIELD,
    name: { kind: Kind.NAME, value: 'v' },
    selectionSet: selections.length ? { kind: Kind.SELECTION_SET, selections } : undefined,
  };
  const document: DocumentNode = {
    kind: Kind.DOCUMENT,
    definitions: [
      {
        kind: Kind.OPERATION_DEFINITION,
        operation: js.OperationTypeNode.QUERY,
        selectionSet: { kind: Kind.SELECTION_SET, selections: [field] },
      },
      ...Object.values(info.fragments),
    ],
  };
  const types = new Map(
    (info.operation.variableDefinitions ?? []).map((d) => [d.variable.name.value, js.typeFromAST(info.schema, d.type)]),
  );
  // A valid document defines every variable it uses, with an input type.
  const literal = (name: string) => js.astFromValue(info.variableValues[name], types.get(name) as GraphQLInputType);
  const typename: FieldNode = {
    kind: Kind.FIELD,
    alias: { kind: Kind.NAME, value: TYPE_KEY },
    name: { kind: Kind.NAME, value: '__typename' },
  };
  return js.visit(document, {
    // An argument whose variable was not given is left out, as the request left it out.
    Argument: (node) => (node.value.kind === Kind.VARIABLE && literal(node.value.name.value) === null ? null : undefined),
    ObjectField: (node) => (node.value.kind === Kind.VARIABLE && literal(node.value.name.value) === null ? null : undefined),
    Variable: (node) => literal(node.name.value) ?? { kind: Kind.NULL },
    SelectionSet: {
      leave: (node: SelectionSetNode) => ({ ...node, selections: [...node.selections, typename] }),
    },
  });
}

/**
 * What the client receives for a mutation field whose resolver returned `value`: its selected fields
 * resolved (field resolvers included) and its scalars serialised, through the application's own
 * schema and context — plain JSON, so a replay answers these bytes whatever the resolver returned
 * (a `Date`, a `BigInt` behind a scalar, an entity whose methods a `@ResolveField` calls).
 */
export async function fieldOutput(js: GraphqlJs, value: unknown, info: GraphQLResolveInfo, context: unknown): Promise<unknown> {
  const result: ExecutionResult = await js.execute({
    schema: probeSchema(js, info.schema, info.returnType),
    document: probeDocument(js, info),
    rootValue: value,
    contextValue: context,
  });
  const data = (result.data as { v?: unknown } | null | undefined)?.v ?? null;
  const errors = result.errors?.map((e) => ({
    // Every error of the execution is a field's: it has a path, under `v`.
    path: (e.path as (string | number)[]).slice(1),
    message: e.message,
    ...(e.extensions && Object.keys(e.extensions).length ? { extensions: e.extensions } : {}),
  }));
  return storedOutput(errors?.length ? { data, errors } : { data });
}
