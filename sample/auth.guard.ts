import { type CanActivate, type ExecutionContext, Injectable, UnauthorizedException } from '@nestjs/common';

/** Demo bearer tokens and the accounts they stand for. A real app verifies a JWT or a session here. */
export const DEMO_TOKENS: Readonly<Record<string, string>> = {
  'alice-token': 'acct_alice',
  'bob-token': 'acct_bob',
};

export interface Caller {
  accountId: string;
}

/** Puts the caller on `req.user`, where the identity resolver finds it. */
@Injectable()
export class AuthGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<{ headers: Record<string, string | undefined>; user?: Caller }>();
    const header = req.headers.authorization;
    const token = typeof header === 'string' && header.startsWith('Bearer ') ? header.slice(7) : undefined;
    const accountId = token === undefined ? undefined : DEMO_TOKENS[token];
    if (!accountId) throw new UnauthorizedException({ error: 'a valid bearer token is required' });
    req.user = { accountId } satisfies Caller;
    return true;
  }
}
