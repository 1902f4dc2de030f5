/** The name of the response `extensions` entry that lists the replayed mutation fields. */
export const REPLAY_EXTENSION = 'idempotency';

/** The replayed fields (response keys) of each GraphQL request, by its context object. */
const replayed = new WeakMap<object, string[]>();

/** Notes that the mutation answered under `responseKey` in the request with context `context` was replayed. */
export function markReplayed(context: object, responseKey: string): void {
  const fields = replayed.get(context);
  if (fields) fields.push(responseKey);
  else replayed.set(context, [responseKey]);
}

/** The part of an Apollo Server 4/5 response that the plugin writes. */
interface ApolloResponse {
  body: { kind: string; singleResult?: { extensions?: Record<string, unknown> } };
}

/**
 * An Apollo Server plugin that adds `extensions.idempotency: { replayed: ['refund'] }` to a response
 * whose mutations were replayed (their response keys, aliases included). Add it to
 * `GraphQLModule.forRoot({ plugins: [idempotencyApolloPlugin()] })`; without it a replay is marked by
 * the `Idempotent-Replayed` header only.
 */
export function idempotencyApolloPlugin(): object {
  return {
    requestDidStart: () =>
      Promise.resolve({
        willSendResponse: ({ response, contextValue }: { response: ApolloResponse; contextValue: object }) => {
          const fields = replayed.get(contextValue);
          const single = response.body.kind === 'single' ? response.body.singleResult : undefined;
          if (fields && single) single.extensions = { ...single.extensions, [REPLAY_EXTENSION]: { replayed: fields } };
          return Promise.resolve();
        },
      }),
  };
}
