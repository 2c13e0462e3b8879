/**
 * Optional signing of a run log's final hash with the operator's Ed25519 key, so a verifier holding
 * only the public key can tell the log's end was written by a worker with the private one. The key
 * file (PEM, PKCS#8) is read and checked when the worker starts: a missing, unreadable or non-Ed25519
 * key stops start-up. What is signed is one line of text naming the run, the line count and the final
 * hash, so a signature cannot be moved to another run or another length.
 */
import { createHash, createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { InvalidInputError } from '../domain/errors';

export interface LogSignature {
  alg: 'ed25519';
  /** The first 16 hex digits of the SHA-256 of the public key (DER, SPKI): which key signed. */
  keyId: string;
  /** Base64 of the 64-byte signature. */
  value: string;
}

/** The text a signature covers. */
export function signedText(runId: string, lines: number, finalHash: string): string {
  return `corral-log-v1 ${runId} ${lines} ${finalHash}`;
}

const keyIdOf = (pub: KeyObject): string => createHash('sha256').update(pub.export({ type: 'spki', format: 'der' })).digest('hex').slice(0, 16);

export class LogSigner {
  readonly keyId: string;
  private constructor(private readonly key: KeyObject, readonly publicKey: KeyObject) {
    this.keyId = keyIdOf(publicKey);
  }

  /** Reads and checks the key file; `setting` names the variable in errors. */
  static fromFile(path: string, setting = 'CORRAL_LOG_SIGNING_KEY_FILE'): LogSigner {
    const pem = readPem(path, setting);
    let key: KeyObject;
    try {
      key = createPrivateKey(pem);
    } catch (err) {
      throw new InvalidInputError(`${setting}: ${path} is not a private key in PEM (PKCS#8): ${(err as Error).message}`, setting);
    }
    if (key.asymmetricKeyType !== 'ed25519') {
      throw new InvalidInputError(`${setting}: ${path} holds an ${key.asymmetricKeyType ?? 'unknown'} key; the log is signed with Ed25519 (openssl genpkey -algorithm ed25519)`, setting);
    }
    return new LogSigner(key, createPublicKey(key));
  }

  sign(runId: string, lines: number, finalHash: string): LogSignature {
    return { alg: 'ed25519', keyId: this.keyId, value: sign(null, Buffer.from(signedText(runId, lines, finalHash)), this.key).toString('base64') };
  }
}

/** A key file's text; a file that cannot be read is an error naming `setting`. */
function readPem(path: string, setting: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new InvalidInputError(`${setting}: cannot read ${path}: ${(err as Error).message}`, setting);
  }
}

/** A public key (PEM, SPKI) to check signatures with; a private key file gives its public half. */
export function loadVerifyKey(path: string, setting = 'CORRAL_LOG_VERIFY_KEY_FILE'): { key: KeyObject; keyId: string } {
  const pem = readPem(path, setting);
  let key: KeyObject;
  try {
    key = /PRIVATE KEY/.test(pem) ? createPublicKey(createPrivateKey(pem)) : createPublicKey(pem);
  } catch (err) {
    throw new InvalidInputError(`${setting}: ${path} is not a PEM key: ${(err as Error).message}`, setting);
  }
  if (key.asymmetricKeyType !== 'ed25519') throw new InvalidInputError(`${setting}: ${path} holds an ${key.asymmetricKeyType ?? 'unknown'} key, not Ed25519`, setting);
  return { key, keyId: keyIdOf(key) };
}

/** Whether `sig` is a valid signature of the log's end under `key`. */
export function checkSignature(key: KeyObject, runId: string, lines: number, finalHash: string, sig: LogSignature): boolean {
  try {
    return verify(null, Buffer.from(signedText(runId, lines, finalHash)), key, Buffer.from(sig.value, 'base64'));
  } catch {
    return false;
  }
}
