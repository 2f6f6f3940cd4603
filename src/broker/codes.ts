/** Enrollment codes (DESIGN §3.7): 125 bits of chance in five groups of five a person can type. */
import { randomBytes } from 'node:crypto';

/** Crockford's base32: no I, L, O or U, so a code read aloud or copied by hand survives. */
const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const GROUPS = 5;
const GROUP_LENGTH = 5;
export const CODE_BITS = GROUPS * GROUP_LENGTH * 5;

export function newCode(): string {
  const bytes = randomBytes(GROUPS * GROUP_LENGTH);
  // 256 is a multiple of 32: taking each byte mod 32 keeps every symbol equally likely.
  const chars = [...bytes].map((b) => ALPHABET[b % 32]).join('');
  return (chars.match(new RegExp(`.{${GROUP_LENGTH}}`, 'g')) ?? []).join('-');
}

/**
 * A code's id (DESIGN §3.7): 80 random bits in lower-case hex, drawn apart from the code, so knowing it
 * tells nothing of the code; 20 characters, never the shape of a code (normaliseCode takes 25).
 */
export function newCodeId(): string {
  return randomBytes(10).toString('hex');
}

/**
 * The code as it is hashed: upper case, separators and spaces dropped, and the letters people confuse
 * mapped as Crockford's base32 says (O → 0, I and L → 1); undefined when it cannot be a code.
 */
export function normaliseCode(typed: string): string | undefined {
  const plain = typed.toUpperCase().replace(/[\s-]/g, '').replace(/O/g, '0').replace(/[IL]/g, '1');
  return plain.length === GROUPS * GROUP_LENGTH && [...plain].every((c) => ALPHABET.includes(c)) ? plain : undefined;
}
