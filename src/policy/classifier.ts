/**
 * The risk classifier for calls the static layer leaves open. One request asks two questions: a
 * `score` over four risk levels (low, medium, high, critical → 0..3) and a `predicate` "authorized".
 * Primary path: the OpenAI Decisions API (`client.decisions.create`). For OpenAI-compatible servers
 * without /decisions (404/405/501, or an SDK without the resource) it falls back — and remembers
 * per client — to chat completions with a strict JSON schema asking the same two questions.
 * Thresholds: risk ≥ denyAt → deny; risk < allowBelow and authorized ≥ authorizedAllowAt → allow;
 * otherwise ask. Timeout, refusal, missing or malformed answer, outage → ask, never allow.
 */
import type OpenAI from 'openai';
import { z } from 'zod';
import type { ClassifierAnswer, Decision, RiskLevel } from '../domain/gate';
import { AUTHORIZED_QUESTION, buildUserPrompt, RISK_LEVELS, RISK_QUESTION, SYSTEM_INSTRUCTIONS, type PromptInput } from './classifier-prompt';

export interface ClassifierOptions {
  client: OpenAI;
  model: string;
  /** Defaults: 2.5, 1, 0.5 (CORRAL_RISK_DENY_AT, CORRAL_RISK_ALLOW_BELOW, CORRAL_AUTHORIZED_ALLOW_AT). */
  denyAt?: number;
  allowBelow?: number;
  authorizedAllowAt?: number;
  /** CORRAL_CLASSIFIER_TIMEOUT_MS; default 20 000. */
  timeoutMs?: number;
  clock?: () => number;
}

export interface ClassifierInput extends PromptInput {
  signal?: AbortSignal;
}

const decisionsUnsupported = new WeakMap<object, true>();

const DecisionsResponse = z.object({
  answers: z.array(z.object({
    type: z.string(),
    name: z.string().nullable().optional(),
    score: z.number().optional(),
    probability: z.number().optional(),
  }).passthrough()),
});

const ChatAnswer = z.strictObject({
  risk_level: z.enum(['low', 'medium', 'high', 'critical']),
  authorized_probability: z.number().min(0).max(1),
});

const CHAT_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['risk_level', 'authorized_probability'],
  properties: {
    risk_level: {
      type: 'string',
      enum: RISK_LEVELS.map((l) => l.label),
      description: `${RISK_QUESTION} ${RISK_LEVELS.map((l) => `${l.label}: ${l.description}`).join(' ')}`,
    },
    authorized_probability: { type: 'number', description: `Probability (0..1) that this is true: ${AUTHORIZED_QUESTION}` },
  },
} as const;

class Unsupported extends Error {}

export class Classifier {
  private readonly denyAt: number;
  private readonly allowBelow: number;
  private readonly authorizedAllowAt: number;
  private readonly timeoutMs: number;
  private readonly clock: () => number;

  constructor(private readonly opts: ClassifierOptions) {
    this.denyAt = opts.denyAt ?? 2.5;
    this.allowBelow = opts.allowBelow ?? 1;
    this.authorizedAllowAt = opts.authorizedAllowAt ?? 0.5;
    this.timeoutMs = opts.timeoutMs ?? 20_000;
    this.clock = opts.clock ?? Date.now;
  }

  async classify(input: ClassifierInput): Promise<ClassifierAnswer> {
    const started = this.clock();
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(new Error('classifier timeout')), this.timeoutMs);
    const signal = input.signal ? AbortSignal.any([input.signal, timeout.signal]) : timeout.signal;
    const { client } = this.opts;
    let via: ClassifierAnswer['via'] = 'none';
    try {
      let answer: { risk: number; authorized: number } | string;
      if (!decisionsUnsupported.has(client) && typeof client.decisions?.create === 'function') {
        via = 'decisions';
        try {
          answer = await this.viaDecisions(input, signal);
        } catch (e) {
          if (!(e instanceof Unsupported)) throw e;
          decisionsUnsupported.set(client, true);
          via = 'chat';
          answer = await this.viaChat(input, signal);
        }
      } else {
        via = 'chat';
        answer = await this.viaChat(input, signal);
      }
      if (typeof answer === 'string') return this.failed(via, answer, started);
      return this.decide(answer.risk, answer.authorized, via, started);
    } catch (e) {
      const why = timeout.signal.aborted ? `timeout after ${this.timeoutMs} ms` : input.signal?.aborted ? 'cancelled' : describe(e);
      return this.failed(via, why, started);
    } finally {
      clearTimeout(timer);
    }
  }

  private decide(risk: number, authorized: number, via: ClassifierAnswer['via'], started: number): ClassifierAnswer {
    const r = Math.min(3, Math.max(0, risk));
    const a = Math.min(1, Math.max(0, authorized));
    let decision: Decision = 'ask';
    if (r >= this.denyAt) decision = 'deny';
    else if (r < this.allowBelow && a >= this.authorizedAllowAt) decision = 'allow';
    return { risk: r, riskLevel: levelOf(r), authorized: a, decision, latencyMs: this.clock() - started, via };
  }

  private failed(via: ClassifierAnswer['via'], error: string, started: number): ClassifierAnswer {
    return { risk: 3, riskLevel: 'critical', authorized: 0, decision: 'ask', latencyMs: this.clock() - started, via, error };
  }

  private async viaDecisions(input: ClassifierInput, signal: AbortSignal): Promise<{ risk: number; authorized: number } | string> {
    let raw: unknown;
    try {
      raw = await this.opts.client.decisions.create({
        model: this.opts.model,
        input: [
          { role: 'developer', content: SYSTEM_INSTRUCTIONS },
          { role: 'user', content: buildUserPrompt(input) },
        ],
        questions: [
          { type: 'score', name: 'risk', instructions: RISK_QUESTION, levels: RISK_LEVELS.map((l) => ({ label: l.label, description: l.description })) },
          { type: 'predicate', name: 'authorized', instructions: AUTHORIZED_QUESTION },
        ],
      }, { signal, maxRetries: 0, timeout: this.timeoutMs });
    } catch (e) {
      const status = (e as { status?: number }).status;
      if (status === 404 || status === 405 || status === 501) throw new Unsupported();
      throw e;
    }
    const parsed = DecisionsResponse.safeParse(raw);
    if (!parsed.success) return 'malformed decisions response';
    const risk = parsed.data.answers.find((a) => a.name === 'risk');
    const auth = parsed.data.answers.find((a) => a.name === 'authorized');
    if (!risk || !auth) return 'missing answer';
    if (risk.type === 'refusal' || auth.type === 'refusal') return 'refusal';
    if (risk.type !== 'score' || typeof risk.score !== 'number' || !Number.isFinite(risk.score)) return 'malformed risk answer';
    if (auth.type !== 'predicate' || typeof auth.probability !== 'number' || !Number.isFinite(auth.probability)) return 'malformed authorized answer';
    return { risk: risk.score, authorized: auth.probability };
  }

  private async viaChat(input: ClassifierInput, signal: AbortSignal): Promise<{ risk: number; authorized: number } | string> {
    const res = await this.opts.client.chat.completions.create({
      model: this.opts.model,
      messages: [
        { role: 'system', content: `${SYSTEM_INSTRUCTIONS} Answer two questions. risk_level: ${RISK_QUESTION} authorized_probability: ${AUTHORIZED_QUESTION}` },
        { role: 'user', content: buildUserPrompt(input) },
      ],
      response_format: { type: 'json_schema', json_schema: { name: 'tool_call_review', strict: true, schema: CHAT_SCHEMA as unknown as Record<string, unknown> } },
    }, { signal, maxRetries: 0, timeout: this.timeoutMs });
    const msg = res.choices?.[0]?.message;
    if (!msg) return 'missing answer';
    if (msg.refusal) return 'refusal';
    let json: unknown;
    try {
      json = JSON.parse(msg.content ?? '');
    } catch {
      return 'malformed chat answer';
    }
    const parsed = ChatAnswer.safeParse(json);
    if (!parsed.success) return 'malformed chat answer';
    return { risk: RISK_LEVELS.findIndex((l) => l.label === parsed.data.risk_level), authorized: parsed.data.authorized_probability };
  }
}

function levelOf(risk: number): RiskLevel {
  return RISK_LEVELS[Math.min(3, Math.max(0, Math.round(risk)))]!.label;
}

function describe(e: unknown): string {
  const err = e as { status?: number; message?: string };
  return err?.status ? `HTTP ${err.status}` : `outage: ${err?.message ?? String(e)}`;
}
