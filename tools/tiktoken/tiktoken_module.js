// Loads the tiktoken npm package that scripts/setup.sh installs, or says how to get it.
'use strict';
const path = require('path');

const modulePath = path.join(__dirname, '..', '..', 'third_party', 'npm', 'node_modules', 'tiktoken');

function gpt2Encoding() {
  let tiktoken;
  try {
    tiktoken = require(modulePath);
  } catch (e) {
    console.error(`cannot load tiktoken from ${modulePath} (run scripts/setup.sh): ${e.message}`);
    process.exit(2);
  }
  return tiktoken.get_encoding('gpt2');
}

module.exports = { gpt2Encoding };
