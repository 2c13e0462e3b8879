/** Minimal typings for `s3rver` (an S3-compatible server on the local filesystem, used by tests and benches as the object store). */
declare module 's3rver' {
  interface S3rverOptions {
    address?: string;
    port?: number;
    silent?: boolean;
    directory: string;
    configureBuckets?: Array<{ name: string }>;
    resetOnClose?: boolean;
  }
  export default class S3rver {
    constructor(o: S3rverOptions);
    run(): Promise<{ address: string; port: number }>;
    close(): Promise<void>;
  }
}
