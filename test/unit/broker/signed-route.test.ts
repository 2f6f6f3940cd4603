import { describe, expect, it } from 'vitest';
import type { SignedRoute } from '../../../src/broker/auth/authenticate.js';

describe('signed routes are served only through the authentication stages', () => {
  it('a route written by hand, with a handle of its own, is not a SignedRoute: the compiler refuses it', () => {
    const handWritten = { name: 'token' as const, handle: async () => ({ status: 200, body: {} }) };
    // @ts-expect-error a SignedRoute carries a brand only keyRoute and carriedKeyRoute give
    const route: SignedRoute = handWritten;
    expect(route.name).toBe('token');
  });
});
