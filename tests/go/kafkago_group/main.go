// A kafka-go group reader, as a Go service would run it: a writer produces the messages, a reader
// in a consumer group fetches them and commits each one it has handled, then leaves.
//
// usage: kafkago_group BOOTSTRAP TOPIC GROUP MESSAGES
// Prints "consumed N" and exits 0 on success.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	kafka "github.com/segmentio/kafka-go"
)

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 5 {
		fail("usage: kafkago_group BOOTSTRAP TOPIC GROUP MESSAGES")
	}
	brokers := []string{os.Args[1]}
	topic, group := os.Args[2], os.Args[3]
	total, _ := strconv.Atoi(os.Args[4])
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	writer := kafka.NewWriter(kafka.WriterConfig{Brokers: brokers, Topic: topic, Balancer: &kafka.RoundRobin{}})
	var batch []kafka.Message
	for i := 0; i < total; i++ {
		batch = append(batch, kafka.Message{Value: []byte(fmt.Sprintf("m-%d", i))})
	}
	if err := writer.WriteMessages(ctx, batch...); err != nil {
		fail("produce: %v", err)
	}
	writer.Close()

	reader := kafka.NewReader(kafka.ReaderConfig{
		Brokers:           brokers,
		GroupID:           group,
		Topic:             topic,
		MinBytes:          1,
		MaxBytes:          1 << 20,
		MaxWait:           200 * time.Millisecond,
		HeartbeatInterval: 500 * time.Millisecond,
		SessionTimeout:    10 * time.Second,
	})
	seen := map[string]bool{}
	for len(seen) < total {
		msg, err := reader.FetchMessage(ctx)
		if err != nil {
			fail("fetch after %d messages: %v", len(seen), err)
		}
		seen[string(msg.Value)] = true
		// CommitInterval is 0: each commit is sent and acknowledged before this returns.
		if err := reader.CommitMessages(ctx, msg); err != nil {
			fail("commit: %v", err)
		}
	}
	if err := reader.Close(); err != nil {
		fail("close: %v", err)
	}
	fmt.Printf("consumed %d\n", len(seen))
}
