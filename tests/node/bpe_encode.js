// Encodes each line of a file with the gpt-3-encoder npm package and prints one JSON array of ids per line.
// Usage: node bpe_encode.js PACKAGE_DIR LINES_FILE
const fs = require('fs');
const path = require('path');
const { encode } = require(path.resolve(process.argv[2], 'index.js'));
const lines = fs.readFileSync(process.argv[3], 'utf-8').split('\n');
if (lines.length && lines[lines.length - 1] === '') lines.pop();
process.stdout.write(lines.map(l => JSON.stringify(encode(l))).join('\n') + '\n');
