// bench/mcp/sdk.mjs: the peer of bench/mcp, the TypeScript SDK's own client
// (@modelcontextprotocol/sdk, pinned in tests/browser/package-lock.json) on
// the server's stdio, the server a child process of this one as the SDK
// starts it (StdioClientTransport), nothing between them.
//
//   node bench/mcp/sdk.mjs call NODE SERVER N MESSAGE
//     one server; N calls of its echo tool one after the other, each timed
//     from callTool to its result;
//   node bench/mcp/sdk.mjs start NODE SERVER N
//     N times: the server started, the handshake, tools/list, each timed
//     from the transport's creation to the listing; then closed.
//
// Prints one JSON line: {"count", "tools" (the last listing's), "us":
// {"min", "median", "p90", "p99", "max"}}, microseconds, percentiles by
// nearest rank as agrippa-mcpc reports ours.  The server's environment is
// the SDK's default one and API_TOKEN, as bench/mcp gives ours.
import { createRequire } from 'node:module';

const require = createRequire(new URL('../../tests/browser/package.json', import.meta.url));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport, getDefaultEnvironment } = require('@modelcontextprotocol/sdk/client/stdio.js');

const [mode, node, server, nArg, message] = process.argv.slice(2);
const n = Number(nArg);
if (!['call', 'start'].includes(mode) || !node || !server || !(n >= 1)) {
	console.error('usage: node bench/mcp/sdk.mjs call|start NODE SERVER N [MESSAGE]');
	process.exit(2);
}

const now = () => process.hrtime.bigint();
const us = (a, b) => Number(b - a) / 1000;

function stats(v, tools) {
	v.sort((a, b) => a - b);
	const pct = (p) => v[Math.max(0, Math.ceil((v.length * p) / 100) - 1)];
	return {
		count: v.length,
		tools,
		us: { min: pct(0), median: pct(50), p90: pct(90), p99: pct(99), max: pct(100) },
	};
}

async function open() {
	const transport = new StdioClientTransport({
		command: node,
		args: [server, 'stdio'],
		env: { ...getDefaultEnvironment(), API_TOKEN: process.env.API_TOKEN ?? '' },
		stderr: 'ignore',
	});
	const client = new Client({ name: 'bench-mcp-sdk', version: '1.0.0' }, { capabilities: {} });
	await client.connect(transport);
	return client;
}

const times = [];
let tools = 0;
if (mode === 'call') {
	const client = await open();
	tools = (await client.listTools()).tools.length;
	for (let i = 0; i < n; i++) {
		const t0 = now();
		const r = await client.callTool({ name: 'echo', arguments: { message } });
		times.push(us(t0, now()));
		if (r.isError || r.content?.[0]?.text !== `Echo: ${message}`) {
			console.error('bench/mcp/sdk.mjs: a wrong answer: ' + JSON.stringify(r));
			process.exit(1);
		}
	}
	await client.close();
} else {
	for (let i = 0; i < n; i++) {
		const t0 = now();
		const client = await open();
		tools = (await client.listTools()).tools.length;
		times.push(us(t0, now()));
		await client.close();
	}
}
console.log(JSON.stringify(stats(times, tools)));
