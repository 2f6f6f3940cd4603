/**
 * The operator's enrollment codes past their making (operator.ts createCode, DESIGN §3.7 `broker code | codes |
 * cancel`): the vendor checked with the cloud first, codes listed and cancelled by their id — never by the code,
 * which is shown once and stored only as its HMAC.
 */
import { CloudError } from '../cloud/errors.js';
import { Code } from '../protocol/codes.js';
import { normaliseCode } from './codes.js';
import { type Operator, OperatorInputError, refuseUnlessIdentity } from './operator.js';
import type { BrokerStore, CodeListing } from './store/types.js';

/** Where the vendor's token comes from: the broker's VendorTokens, or the cloud asked once by a command. */
export interface VendorTokenSource {
  get(vendorId: string): Promise<string>;
}

/**
 * The cloud's word on the vendor, asked as enrollment asks it (a vendor token): code 1004 (no such vendor
 * under this account) is the operator's mistake, 65; the cloud away is 69, a refused signature 78.
 */
export async function refuseUnknownVendor(vendors: VendorTokenSource, vendorId: string): Promise<void> {
  try {
    await vendors.get(vendorId);
  } catch (err) {
    if (err instanceof CloudError && err.serviceCode === Code.UNKNOWN_IDENTITY)
      throw new OperatorInputError(`the cloud knows no vendor ${vendorId} under this broker's accessKeyId: no code was made`);
    throw err;
  }
}

/** `broker codes`: the outstanding codes (a use left, not expired), of one vendor or all. */
export function listCodes(store: BrokerStore, now: number, vendorId?: string): Promise<CodeListing[]> {
  if (vendorId !== undefined) refuseUnlessIdentity('--vendor-id', 'vendorId', vendorId);
  return store.listCodes({ now, vendorId });
}

const CODE_ID = /^[0-9a-f]{20}$/;

/** Whether an operator's argument is shaped like a code: `broker cancel` refuses one (64) before it reads or logs anything. */
export function isCodeShaped(text: string): boolean {
  return normaliseCode(text) !== undefined;
}

/** `broker cancel`: the code refused from then on; its audit names its id. An id no code has is 65. */
export async function cancelCode(store: BrokerStore, id: string, by: Operator): Promise<CodeListing> {
  if (!CODE_ID.test(id)) throw new OperatorInputError('a code id is 20 hex digits, as broker codes lists them');
  const cancelled = await store.cancelCode(id);
  if (cancelled === undefined) throw new OperatorInputError(`no code has the id ${id}: broker codes lists them`);
  const { vendorId, deviceId, kind, usesLeft } = cancelled;
  by.audit.record({ action: 'code', actor: by.actor, vendorId, deviceId, codeId: id, outcome: 'cancelled' }, 'enrollment code cancelled', {
    kind,
    usesLeft,
  });
  return cancelled;
}
