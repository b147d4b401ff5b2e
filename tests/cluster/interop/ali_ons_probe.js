'use strict';
// Sends 1005, 1012, 1013, 1003, 1002 to an rmqc node with ali-ons' own channel and codec and
// prints each answer (code, remark, extFields) as one JSON line.
const Channel = require('ali-ons/lib/channel');
const RemotingCommand = require('ali-ons/lib/protocol/command/remoting_command');

async function main() {
  const address = process.argv[2];
  const channel = new Channel(address);
  const steps = [
    [1005, {}],
    [1012, { clusterName: 'C', brokerName: 'js-broker' }],
    [1013, { clusterName: 'C', brokerName: 'js-broker', appliedBrokerId: 1, registerCheckCode: '10.1.1.1:30911;1' }],
    [1003, { clusterName: 'C', brokerName: 'js-broker', brokerId: 1, brokerAddress: '10.1.1.1:30911', invokeTime: 1 }],
    [1002, { clusterName: 'C', brokerName: 'js-broker', brokerId: 1, designateElect: false, invokeTime: 1 }],
  ];
  for (const [code, header] of steps) {
    const response = await channel.invoke(RemotingCommand.createRequestCommand(code, header), 3000);
    console.log(JSON.stringify({ request: code, code: response.code, remark: response.remark || null,
      ext: response.extFields || {}, body: response.body ? response.body.toString() : null }));
  }
  channel.close();
}
main().catch(err => { console.error(err); process.exit(1); });
