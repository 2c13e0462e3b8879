/**
 * Minimal typings for `mvdan-sh` (mvdan/sh's bash parser compiled to JavaScript with GopherJS).
 * Nodes mirror the Go AST (https://pkg.go.dev/mvdan.cc/sh/v3/syntax); `syntax.NodeType(n)` names
 * a node's Go type. Only what src/policy/ uses is typed; everything else is reached as ShNode.
 */
declare module 'mvdan-sh' {
  /** Any AST node; fields are read by name after checking NodeType. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  export type ShNode = any;
  export interface ShParser {
    Parse(src: string, name: string): ShNode;
  }
  export interface ShParserOption {
    readonly __option: unique symbol;
  }
  export const syntax: {
    NewParser(...opts: ShParserOption[]): ShParser;
    KeepComments(keep: boolean): ShParserOption;
    Variant(lang: number): ShParserOption;
    LangBash: number;
    Walk(node: ShNode, fn: (node: ShNode | null) => boolean): void;
    NodeType(node: ShNode): string;
  };
}
