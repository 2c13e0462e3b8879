/** Line numbers in a YAML document (the yaml package's Document and LineCounter), for errors that name `file:LINE`. */
import { isNode, type Document, type LineCounter } from 'yaml';

/** The line of the node at `path`, or of its nearest ancestor that has one. */
export function lineOf(doc: Document, lc: LineCounter, path: ReadonlyArray<PropertyKey>): number | undefined {
  for (let n = path.length; n >= 0; n--) {
    const node = doc.getIn(path.slice(0, n) as unknown[], true);
    if (isNode(node) && node.range) return lc.linePos(node.range[0]).line;
  }
  return undefined;
}
