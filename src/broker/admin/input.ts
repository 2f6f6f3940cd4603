/** Reading the admin API's input: query strings, JSON bodies and identity fields, each refusal a 400 naming the field. */
import { IDENTITY_FIELDS, type IdentityField, isIdentity } from '../../protocol/broker.js';
import { badRequest } from './errors.js';

export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 500;

/** A query string's parameters: each at most once, none but those the route names. */
export class QueryReader {
  readonly #query: URLSearchParams;

  constructor(query: URLSearchParams, allowed: readonly string[]) {
    this.#query = query;
    for (const name of new Set(query.keys())) {
      if (!allowed.includes(name)) throw badRequest(`unknown parameter ${name}: this list takes ${allowed.join(', ') || 'none'}`);
      if (query.getAll(name).length > 1) throw badRequest(`${name} given twice`);
    }
  }

  /** The parameter, undefined when absent or empty. */
  text(name: string): string | undefined {
    const value = this.#query.get(name);
    return value === null || value === '' ? undefined : value;
  }

  identity(name: string, field: IdentityField): string | undefined {
    const value = this.text(name);
    if (value !== undefined && !isIdentity(field, value)) throw badRequest(`${name} must be ${IDENTITY_FIELDS[field].says}`);
    return value;
  }

  oneOf<T extends string>(name: string, values: readonly T[]): T | undefined {
    const value = this.text(name);
    if (value !== undefined && !(values as readonly string[]).includes(value))
      throw badRequest(`${name} must be one of ${values.join(', ')}`);
    return value as T | undefined;
  }

  /** A list's page: its limit (default 100, at most 500) and the cursor it continues from, if any. */
  page(): { limit: number; cursor: string | undefined } {
    const value = this.text('limit');
    const limit = value === undefined ? DEFAULT_LIMIT : Number(value);
    if (value !== undefined && (!/^\d{1,3}$/.test(value) || limit < 1 || limit > MAX_LIMIT))
      throw badRequest(`limit must be 1 to ${MAX_LIMIT}`);
    return { limit, cursor: this.text('cursor') };
  }

  /** q: a literal prefix of at most 64 characters, none a control or format character. */
  prefix(name: string): string | undefined {
    const value = this.text(name);
    if (value !== undefined && !/^[^\p{Cc}\p{Cf}\p{Cs}]{1,64}$/u.test(value))
      throw badRequest(`${name} is 1 to 64 characters, none a control or format character`);
    return value;
  }
}

/** A JSON object body's fields, none but those the route names. */
export class BodyReader {
  readonly #body: Record<string, unknown>;

  constructor(body: unknown, allowed: readonly string[]) {
    if (body === undefined) this.#body = {};
    else if (typeof body !== 'object' || body === null || Array.isArray(body)) throw badRequest('the body must be a JSON object');
    else this.#body = body as Record<string, unknown>;
    for (const name of Object.keys(this.#body)) {
      if (!allowed.includes(name)) throw badRequest(`unknown field ${name}: this route takes ${allowed.join(', ') || 'none'}`);
    }
  }

  string(name: string): string | undefined {
    const value = this.#body[name];
    if (value === undefined || value === null) return undefined;
    if (typeof value !== 'string') throw badRequest(`${name} must be a string`);
    return value;
  }

  identity(name: string, field: IdentityField): string | undefined {
    const value = this.string(name);
    if (value !== undefined && !isIdentity(field, value)) throw badRequest(`${name} must be ${IDENTITY_FIELDS[field].says}`);
    return value;
  }

  boolean(name: string): boolean | undefined {
    const value = this.#body[name];
    if (value === undefined || value === null) return undefined;
    if (typeof value !== 'boolean') throw badRequest(`${name} must be true or false`);
    return value;
  }

  integer(name: string, min: number, max: number): number | undefined {
    const value = this.#body[name];
    if (value === undefined || value === null) return undefined;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max)
      throw badRequest(`${name} must be a whole number from ${min} to ${max}`);
    return value;
  }
}

/** A path part that must be an identity field: else 400. */
export function identityParam(value: string | undefined, name: string, field: IdentityField): string {
  if (value === undefined || !isIdentity(field, value)) throw badRequest(`${name} must be ${IDENTITY_FIELDS[field].says}`);
  return value;
}
