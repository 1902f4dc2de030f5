/**
 * A response exactly as it left the server, so that a replay can send the same bytes.
 * Header names are lower case; hop-by-hop headers, `set-cookie`, `content-length` and `date` are never stored.
 */
export interface StoredResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | readonly string[]>>;
  readonly body: Buffer;
}
