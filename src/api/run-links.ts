/**
 * The links every run response carries: where to follow, read and cancel the run, and every artifact
 * (the bundle answers 404 unless the run's workspace.git asked for one and it was made).
 */
export function runLinks(id: string) {
  const self = `/v1/runs/${id}`;
  return {
    self,
    events: `${self}/events`,
    report: `${self}/report`,
    logs: `${self}/logs`,
    workspaceTar: `${self}/artifacts/workspace.tar`,
    patch: `${self}/artifacts/patch`,
    bundle: `${self}/artifacts/agent.bundle`,
    cancel: `${self}/cancel`,
    verify: `${self}/verify`,
  };
}
