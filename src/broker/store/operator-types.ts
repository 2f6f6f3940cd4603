/** The operator's part of the broker's store (types.ts): codes listed and cancelled by id, preauth removed, limits reset. */

/** plain: any new device; adopt: a signing device keeps its botId; replace: a swapped SD card. */
export type CodeKind = 'plain' | 'adopt' | 'replace';

/** A code as `broker codes` lists it: never the code, nor its HMAC. */
export interface CodeListing {
  /** Random, apart from the code: what `broker cancel` takes. */
  id: string;
  vendorId: string;
  /** The device it is bound to; null: any device of its vendor. */
  deviceId: string | null;
  kind: CodeKind;
  usesLeft: number;
  expiresAt: number;
}

/** What `broker codes` lists: the codes with a use left that have not expired by `now`, of one vendor or all. */
export interface CodeFilter {
  now: number;
  vendorId?: string | undefined;
}

/** `broker devices --state S --vendor-id V`: the lines of that state and vendor (either may be absent). */
export interface DeviceFilter {
  state?: string | undefined;
  vendorId?: string | undefined;
}

/** A pre-authorisation `broker preauth --remove` dropped. */
export interface RemovedPreauth {
  keyId: string;
  vendorId: string;
  deviceId: string;
}

export interface OperatorBook {
  listCodes(filter: CodeFilter): Promise<CodeListing[]>;
  /** Deletes the code with this id, whatever its uses or expiry: its row as it was, undefined when there is none. */
  cancelCode(id: string): Promise<CodeListing | undefined>;
  /** Drops the device's pre-authorisation: the key it named, undefined when there was none. */
  removePreauth(vendorId: string, deviceId: string): Promise<RemovedPreauth | undefined>;
  /** Deletes every rate window whose bucket begins with one of `prefixes`: how many windows. */
  resetLimits(prefixes: readonly string[]): Promise<number>;
}
