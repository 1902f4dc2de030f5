import type { GraphQLNamedType, GraphQLOutputType, GraphQLResolveInfo } from 'graphql';
import { MESSAGES } from '../../shared/messages/client.messages.js';
import { type FieldOutput, type GraphqlJs, readOutput, TYPE_KEY } from './field-output.js';

// A mutation's field is answered from the output stored for it, through the application's schema:
// the objects, custom scalars and enums of the output are marked, and the schema's resolvers and
// serialisers hand a marked value through as stored (every other value goes its usual way). The
// first answer is made the same way, so a retry's bytes are the first's by construction.

/** A custom scalar's or an enum's value as the client received it: serialised already. */
class StoredLeaf {
  constructor(readonly value: unknown) {}
}

/** An object of a stored output, its path in the field's output, and the output's errors. */
class StoredObject {
  constructor(
    readonly data: Record<string, unknown>,
    readonly path: readonly (string | number)[],
    readonly output: Replay,
  ) {}

  /** The object's type as the first answer had it (a record of the release before has none). */
  get typename(): string | undefined {
    return this.data[TYPE_KEY] as string | undefined;
  }

  field(info: GraphQLResolveInfo): unknown {
    const key = String(info.path.key);
    // A field the first request did not select has no stored output: retries replay the first selection.
    if (!Object.hasOwn(this.data, key)) throw new this.output.js.GraphQLError(MESSAGES.graphqlNotReplayed(info.fieldName));
    return this.output.revive(this.data[key], info.returnType, [...this.path, key]);
  }
}

class Replay {
  constructor(
    readonly js: GraphqlJs,
    private readonly errors: NonNullable<FieldOutput['errors']>,
  ) {}

  /** The stored value at `path` as graphql-js completes it into the same output. */
  revive(value: unknown, type: GraphQLOutputType, path: readonly (string | number)[]): unknown {
    const { js } = this;
    if (value === null || value === undefined) {
      // graphql-js nulls the nearest nullable field above an error: the highest null the error is
      // under is where throwing it again gives the same data.
      const error = this.errors.find((e) => path.every((part, i) => e.path[i] === part));
      if (error) throw new js.GraphQLError(error.message, { extensions: error.extensions });
      return null;
    }
    const inner = js.isNonNullType(type) ? type.ofType : type;
    if (js.isListType(inner))
      return Array.isArray(value) ? value.map((item, i) => this.revive(item, inner.ofType, [...path, i])) : value;
    if (js.isLeafType(inner)) return js.isSpecifiedScalarType(inner) ? value : new StoredLeaf(value);
    return new StoredObject(value as Record<string, unknown>, path, this);
  }
}

/** Types whose resolvers and serialisers hand stored values through. */
const hooked = new WeakSet<GraphQLNamedType>();

function hook(js: GraphqlJs, info: GraphQLResolveInfo, type: GraphQLNamedType): void {
  if (hooked.has(type)) return;
  hooked.add(type);
  if (js.isScalarType(type) || js.isEnumType(type)) {
    if (js.isSpecifiedScalarType(type)) return;
    const serialize = type.serialize.bind(type);
    type.serialize = (value: unknown) => (value instanceof StoredLeaf ? value.value : serialize(value));
    return;
  }
  if (js.isAbstractType(type)) {
    const resolveType = type.resolveType ?? js.defaultTypeResolver;
    type.resolveType = (value, context, at, abstract) =>
      value instanceof StoredObject && value.typename ? value.typename : resolveType(value, context, at, abstract);
    for (const possible of info.schema.getPossibleTypes(type)) hook(js, info, possible);
  }
  if (js.isObjectType(type) && type.isTypeOf) {
    const isTypeOf = type.isTypeOf;
    // An abstract type's replay named this type already; a field of this type has no other.
    type.isTypeOf = (value, context, at) => value instanceof StoredObject || isTypeOf(value, context, at);
  }
  if (js.isObjectType(type) || js.isInterfaceType(type))
    for (const field of Object.values(type.getFields())) {
      const resolve = field.resolve ?? js.defaultFieldResolver;
      field.resolve = (source, args, context, at) =>
        source instanceof StoredObject ? source.field(at) : resolve(source, args, context, at);
      hook(js, info, js.getNamedType(field.type));
    }
}

/**
 * What the mutation's resolver hands graphql-js for the field: its stored output, marked so that the
 * schema completes it into that output again (the first answer's errors thrown where they were).
 */
export function replayField(js: GraphqlJs, stored: unknown, info: GraphQLResolveInfo): unknown {
  hook(js, info, js.getNamedType(info.returnType));
  const output = readOutput(stored);
  return new Replay(js, output.errors ?? []).revive(output.data, info.returnType, []);
}
