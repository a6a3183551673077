// A Sarama consumer group of two members, as a Go service would run it: both members join, the
// group shares the topic's partitions, a producer writes the messages, the members consume them
// and commit what they consumed, then leave.
//
// usage: sarama_group BOOTSTRAP TOPIC GROUP KAFKA_VERSION MESSAGES
// Prints "member N partitions [...]" for each member and "consumed N", exits 0 on success.
package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

type member struct {
	mu     sync.Mutex
	claims []int32
	seen   map[string]bool
	shared *sync.Map
}

func (m *member) Setup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.claims = append([]int32(nil), s.Claims()[topic]...)
	return nil
}

func (m *member) Cleanup(sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.claims = nil
	return nil
}

func (m *member) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for msg := range c.Messages() {
		m.shared.Store(string(msg.Value), true)
		// Marked offsets are committed every CommitInterval and when the member leaves.
		s.MarkMessage(msg, "")
	}
	return nil
}

func (m *member) held() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int32(nil), m.claims...)
}

var topic string

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func count(m *sync.Map) int {
	n := 0
	m.Range(func(_, _ interface{}) bool { n++; return true })
	return n
}

func waitFor(what string, timeout time.Duration, ok func() bool) {
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			fail("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func main() {
	if len(os.Args) != 6 {
		fail("usage: sarama_group BOOTSTRAP TOPIC GROUP KAFKA_VERSION MESSAGES")
	}
	brokers := []string{os.Args[1]}
	topic = os.Args[2]
	group := os.Args[3]
	version, err := sarama.ParseKafkaVersion(os.Args[4])
	if err != nil {
		fail("version: %v", err)
	}
	total, _ := strconv.Atoi(os.Args[5])

	cfg := sarama.NewConfig()
	cfg.Version = version
	cfg.ClientID = "kcoord-sarama-test"
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewRoundRobinPartitioner
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.CommitInterval = 200 * time.Millisecond
	cfg.Consumer.Return.Errors = true

	ctx, cancel := context.WithCancel(context.Background())
	shared := &sync.Map{}
	var members []*member
	var groups []sarama.ConsumerGroup
	var running sync.WaitGroup
	for i := 0; i < 2; i++ {
		g, err := sarama.NewConsumerGroup(brokers, group, cfg)
		if err != nil {
			fail("member %d: %v", i, err)
		}
		m := &member{shared: shared}
		members = append(members, m)
		groups = append(groups, g)
		go func(i int) {
			for err := range g.Errors() {
				fmt.Fprintf(os.Stderr, "member %d error: %v\n", i, err)
			}
		}(i)
		running.Add(1)
		go func(g sarama.ConsumerGroup, m *member) {
			defer running.Done()
			// Consume returns at every rebalance; a member consumes until it is told to stop.
			for ctx.Err() == nil {
				if err := g.Consume(ctx, []string{topic}, m); err != nil && ctx.Err() == nil {
					fmt.Fprintf(os.Stderr, "consume: %v\n", err)
					time.Sleep(100 * time.Millisecond)
				}
			}
		}(g, m)
	}
	waitFor("both members to hold partitions", 60*time.Second, func() bool {
		return len(members[0].held()) > 0 && len(members[1].held()) > 0
	})

	producer, err := sarama.NewSyncProducer(brokers, cfg)
	if err != nil {
		fail("producer: %v", err)
	}
	for i := 0; i < total; i++ {
		if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(fmt.Sprintf("m-%d", i))}); err != nil {
			fail("produce: %v", err)
		}
	}
	producer.Close()

	waitFor("every message to be consumed", 60*time.Second, func() bool { return count(shared) >= total })
	for i, m := range members {
		held := m.held()
		sort.Slice(held, func(a, b int) bool { return held[a] < held[b] })
		fmt.Printf("member %d partitions %v\n", i, held)
	}
	// Leaving commits what each member marked.
	cancel()
	running.Wait()
	for _, g := range groups {
		if err := g.Close(); err != nil {
			fail("close: %v", err)
		}
	}
	fmt.Printf("consumed %d\n", count(shared))
}
