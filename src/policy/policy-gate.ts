/**
 * PolicyGate implements the Gate port: static policy → (deny: deny) → (allow of a low-risk
 * read-only call: allow) → classifier → ask → human approval when the run has approvals on,
 * otherwise deny ("unattended"). The verdict's `reason` is one sentence the model sees; a blocked
 * call says it was blocked, why, and not to retry the same call.
 */
import { InvalidInputError } from '../domain/errors';
import type { ClassifierAnswer, Decision, Gate, GateContext, GateVerdict, RiskLevel, ToolCallRequest } from '../domain/gate';
import type { ApprovalPort } from './approval-port';
import type { Classifier } from './classifier';
import { evaluateStatic } from './evaluate-static';
import type { Policy } from './policy-schema';

export interface PolicyGateOptions {
  policies: Map<string, Policy>;
  /** Omit to run without the classifier (CORRAL_CLASSIFIER=false): static ask goes to approval. */
  classifier?: Classifier;
  approvals: ApprovalPort;
  clock?: () => number;
}

function trimStop(s: string): string {
  return s.replace(/[.\s]+$/, '');
}

export function blockedReason(why: string): string {
  return `This call was blocked: ${trimStop(why)}; do not retry the same call — choose another approach or explain what you need.`;
}

export class PolicyGate implements Gate {
  constructor(private readonly opts: PolicyGateOptions) {}

  async decide(call: ToolCallRequest, ctx: GateContext): Promise<GateVerdict> {
    const policy = this.opts.policies.get(ctx.policy);
    if (!policy) throw new InvalidInputError(`unknown policy "${ctx.policy}" (known: ${[...this.opts.policies.keys()].join(', ')})`, 'policy');
    const st = evaluateStatic(policy, { tool: call.tool, args: call.args });
    const staticPart: GateVerdict['static'] = { decision: st.decision, rule: st.rule, reason: st.reason, ...(st.risk ? { risk: st.risk } : {}) };

    if (st.decision === 'deny') {
      return { decision: 'deny', static: staticPart, reason: blockedReason(`the policy forbids it (${st.reason})`) };
    }
    if (st.decision === 'allow' && st.readOnly && (st.risk ?? 'low') === 'low') {
      return { decision: 'allow', static: staticPart, reason: `Allowed by the policy: ${trimStop(st.reason)}.` };
    }

    let decision: Decision = st.decision;
    let why = st.reason;
    let classifier: ClassifierAnswer | undefined;
    let risk: RiskLevel | undefined = st.risk;
    if (this.opts.classifier) {
      classifier = await this.opts.classifier.classify({
        task: ctx.task, tool: call.tool, args: call.args, evidence: ctx.evidence,
        staticDecision: { decision: st.decision, rule: st.rule, reason: st.reason }, signal: ctx.signal,
      });
      decision = classifier.decision;
      risk = classifier.error ? risk : classifier.riskLevel;
      why = classifier.error
        ? `the risk review was unavailable (${classifier.error}) and ${trimStop(st.reason)}`
        : `the risk review rated it ${classifier.riskLevel} risk (${classifier.risk.toFixed(2)}) with ${Math.round(classifier.authorized * 100)}% confidence the task authorizes it`;
    }
    const withC = classifier ? { classifier } : {};
    if (decision === 'deny') return { decision: 'deny', static: staticPart, ...withC, reason: blockedReason(why) };
    if (decision === 'allow') return { decision: 'allow', static: staticPart, ...withC, reason: `Allowed: ${trimStop(why)}.` };

    if (!ctx.approvals) {
      return { decision: 'deny', static: staticPart, ...withC, reason: blockedReason(`unattended: it needs a human's approval and this run has none (${trimStop(why)})`) };
    }
    try {
      const approval = await this.opts.approvals.request(
        { runId: ctx.runId, callId: call.callId, tool: call.tool, args: call.args, reason: why, ...(risk ? { risk } : {}) },
        ctx.signal,
      );
      if (approval.approved) return { decision: 'allow', static: staticPart, ...withC, approval, reason: `Allowed: approved by ${approval.by}.` };
      const no = approval.timedOut ? 'nobody approved it in time' : `${approval.by} denied it`;
      return { decision: 'deny', static: staticPart, ...withC, approval, reason: blockedReason(no) };
    } catch (e) {
      if (ctx.signal?.aborted) throw e;
      return { decision: 'deny', static: staticPart, ...withC, reason: blockedReason(`the approval could not be obtained (${(e as Error).message})`) };
    }
  }
}
