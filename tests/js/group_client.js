// Produces or consumes with kafkajs for the integration tests.
//   node group_client.js produce <bootstrap> <topic> <count> <first>
//   node group_client.js consume <bootstrap> <topic> <group> <members> <target> <timeoutMs>
// "consume" runs <members> consumers in one group, commits after every batch, stops once
// <target> records are committed, and prints one JSON line: [[partition, offset, value], ...].
'use strict'
const { Kafka, Partitioners, logLevel } = require('kafkajs')

const [mode, bootstrap, topic, ...rest] = process.argv.slice(2)
const kafka = new Kafka({ clientId: 'kcoord-js-test', brokers: [bootstrap], logLevel: logLevel.ERROR })

async function produce (count, first) {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1,
    createPartitioner: Partitioners.DefaultPartitioner })
  await producer.connect()
  for (let start = 0; start < count; start += 500) {
    const messages = []
    for (let i = start; i < Math.min(count, start + 500); i++) {
      messages.push({ key: `k${first + i}`, value: `m${first + i}` })
    }
    await producer.send({ topic, acks: -1, messages })
  }
  await producer.disconnect()
}

async function consume (group, members, target, timeoutMs) {
  const seen = []
  let committed = 0
  let finish
  const done = new Promise(resolve => { finish = resolve })
  const timer = setTimeout(() => finish(), timeoutMs)
  const consumers = []
  for (let m = 0; m < members; m++) {
    const consumer = kafka.consumer({ groupId: group, sessionTimeout: 10000, heartbeatInterval: 500 })
    consumers.push(consumer)
    await consumer.connect()
    await consumer.subscribe({ topic, fromBeginning: true })
  }
  await Promise.all(consumers.map(consumer => consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      if (batch.messages.length === 0) return
      const last = batch.messages[batch.messages.length - 1]
      await consumer.commitOffsets([{ topic, partition: batch.partition, offset: (BigInt(last.offset) + 1n).toString() }])
      for (const msg of batch.messages) seen.push([batch.partition, Number(msg.offset), msg.value.toString()])
      committed += batch.messages.length
      if (committed >= target) finish()
    }
  })))
  await done
  clearTimeout(timer)
  await Promise.all(consumers.map(c => c.disconnect()))
  process.stdout.write(JSON.stringify(seen) + '\n')
}

async function main () {
  if (mode === 'produce') {
    await produce(Number(rest[0]), Number(rest[1]))
  } else if (mode === 'consume') {
    await consume(rest[0], Number(rest[1]), Number(rest[2]), Number(rest[3]))
  } else {
    throw new Error(`unknown mode ${mode}`)
  }
}

main().then(() => process.exit(0), err => { console.error(err); process.exit(1) })
