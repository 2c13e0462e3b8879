#!/usr/bin/env node
// corral-mcp-remote URL: a remote MCP server (Streamable HTTP) as a stdio server inside the sandbox.
// corral's worker speaks MCP to this process over the exec's stdin/stdout like to any stdio server;
// this process relays each message to URL with @modelcontextprotocol/sdk's Streamable-HTTP client
// transport and back. Its HTTP goes through the run's egress proxy (HTTPS_PROXY, honoured by Node's
// fetch with NODE_USE_ENV_PROXY=1, which corral sets): the remote host must be on the run's allowlist,
// and the worker itself never connects to it. A request the remote end cannot take is answered with a
// JSON-RPC error at once, so no call waits for its timeout.
/* global require, process, URL */
/* eslint-disable @typescript-eslint/no-require-imports, no-restricted-properties -- a CommonJS program of the image, not corral's code */
'use strict';
const { StdioServerTransport } = require('@modelcontextprotocol/sdk/server/stdio.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');

const target = process.argv[2];
if (!target) {
  process.stderr.write('usage: corral-mcp-remote URL\n');
  process.exit(2);
}
const local = new StdioServerTransport();
const remote = new StreamableHTTPClientTransport(new URL(target));
/** Ids of initialize requests: their result carries the protocol version the HTTP transport must send. */
const initIds = new Set();
let ending = false;

function end(code) {
  if (ending) return;
  ending = true;
  Promise.allSettled([remote.close(), local.close()]).finally(() => process.exit(code));
}

local.onmessage = (msg) => {
  if (msg.method === 'initialize' && msg.id !== undefined) initIds.add(msg.id);
  remote.send(msg).catch((err) => {
    process.stderr.write(`corral-mcp-remote: ${target}: ${err && err.message}\n`);
    if (msg.id !== undefined && msg.method !== undefined) {
      local.send({ jsonrpc: '2.0', id: msg.id, error: { code: -32000, message: `the remote MCP server could not be reached: ${String(err && err.message).slice(0, 300)}` } }).catch(() => end(1));
    }
  });
};
remote.onmessage = (msg) => {
  if (msg.id !== undefined && initIds.delete(msg.id) && msg.result && typeof msg.result.protocolVersion === 'string') {
    remote.setProtocolVersion(msg.result.protocolVersion);
  }
  local.send(msg).catch(() => end(1));
};
remote.onerror = (err) => process.stderr.write(`corral-mcp-remote: ${err && err.message}\n`);
local.onclose = () => end(0);
local.onerror = (err) => process.stderr.write(`corral-mcp-remote: stdin: ${err && err.message}\n`);

remote.start().then(() => local.start()).catch((err) => {
  process.stderr.write(`corral-mcp-remote: ${err && err.message}\n`);
  end(1);
});
