/** The links every run response carries: where to follow, read and cancel the run. */
export function runLinks(id: string) {
  const self = `/v1/runs/${id}`;
  return {
    self,
    events: `${self}/events`,
    report: `${self}/report`,
    logs: `${self}/logs`,
    workspaceTar: `${self}/artifacts/workspace.tar`,
    patch: `${self}/artifacts/patch`,
    cancel: `${self}/cancel`,
  };
}
