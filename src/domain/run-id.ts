/**
 * A run id, defined once: `run_` and 6–64 letters, digits, `_` or `-`. The API's paths, job data,
 * sub-run records, suspensions and list cursors all check against this.
 */
import { z } from 'zod';

export const RUN_ID = /^run_[A-Za-z0-9_-]{6,64}$/;
/** RUN_ID without its anchors, for patterns that embed a run id. */
export const RUN_ID_BODY = RUN_ID.source.slice(1, -1);

export const RunId = z.string().regex(RUN_ID, 'must be a run id (run_ and 6–64 letters, digits, _ or -)');

export const isRunId = (v: unknown): v is string => typeof v === 'string' && RUN_ID.test(v);
