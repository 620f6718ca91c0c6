// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// check.js: every LogQL query docs/operations.md documents (a code block right after a
// "<!-- logql: WHAT -->" comment) parses with Grafana's own LogQL grammar (@grafana/lezer-logql,
// the one Grafana's query editor uses), with no error node. Prints one line per query; exits 1
// when one does not parse or when the page has none.
//
//   node tests/logql/check.js docs/operations.md
'use strict';
const fs = require('fs');
const { parser } = require('@grafana/lezer-logql');

const text = fs.readFileSync(process.argv[2], 'utf8');
const re = /<!-- logql: ([^>]*?) -->\n```\n([\s\S]*?)\n```/g;
let m, n = 0, bad = 0;
while ((m = re.exec(text))) {
	const what = m[1], query = m[2];
	const errors = [];
	parser.parse(query).iterate({
		enter(node) {
			if (node.type.isError) errors.push(node.from);
		},
	});
	n++;
	if (errors.length) {
		bad++;
		console.log(`not parsed: ${what}: ${query} (error at ${errors.join(', ')})`);
	} else {
		console.log(`parsed: ${what}: ${query}`);
	}
}
if (!n) {
	console.log(`no <!-- logql: --> query in ${process.argv[2]}`);
	process.exit(1);
}
process.exit(bad ? 1 : 0);
